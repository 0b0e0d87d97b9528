"""Print the MODEL_SHA256 entry of a built embedded model: python -m bracket.embedded resources/models/NAME"""

import json
import sys

from bracket.embedded import pin_entry

if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    print(json.dumps(pin_entry(sys.argv[1]), indent=1))
