import sys
from pathlib import Path

# The double and the fake runner are imported by their unique module names.
sys.path.insert(0, str(Path(__file__).parent))
