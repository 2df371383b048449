"""python3 -m gpusim_torch record STEP.py --out step.gpusim [options]"""
import sys

from gpusim_torch.cli import main

sys.exit(main(sys.argv[1:]))
