"""Renderers: terminal (rich), Markdown and self-contained HTML with inline SVG plots. They only render."""
