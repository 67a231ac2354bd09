"""``python -m otagym.cli``: the ``otagym`` console command."""

import sys

from otagym.cli.commands import main

sys.exit(main())
