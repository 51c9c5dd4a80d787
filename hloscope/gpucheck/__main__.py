import sys

from hloscope.gpucheck.main import main

sys.exit(main())
