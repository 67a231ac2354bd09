"""``python -m otagym``: the ``otagym`` console command (as ``python -m otagym.cli``)."""

import sys

from otagym.cli.commands import main

sys.exit(main())
