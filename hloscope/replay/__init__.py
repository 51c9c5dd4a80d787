"""`hloscope replay`: run a framework's captured XLA program alone, through jaxlib's XLA, to time the program apart
from the framework around it."""
