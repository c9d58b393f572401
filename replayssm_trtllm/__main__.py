import sys

from replayssm_trtllm.cli import main

sys.exit(main())
