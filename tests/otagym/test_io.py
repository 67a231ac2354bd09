"""The one writer of every file (``otagym._io``): temporary files owned by their writer, cleaned only when their
writer is provably gone, and written files with the permissions ``open`` would give them."""

import os
import stat
import subprocess
import sys
import time

import pytest

from otagym import _io
from otagym._io import atomic_write, remove_stale_temporaries, write_json

WRITER = """
import sys, time
from otagym._io import atomic_write
with atomic_write(sys.argv[1]) as fh:
    fh.write("partial")
    print("writing", flush=True)
    sys.stdin.readline()  # hold the temporary file open until told to finish
    fh.write(" and finished")
"""


def test_written_files_have_opens_permissions_not_a_temporary_files(tmp_path):
    old = os.umask(0o022)
    try:
        path = write_json(tmp_path / "a.json", {"x": 1})
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~_io._UMASK


@pytest.mark.slow
def test_a_cleanup_leaves_another_writers_file_in_flight_and_removes_a_dead_writers(tmp_path):
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path / "out.json")], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert writer.stdout.readline() == "writing\n"
    (live,) = tmp_path.glob(".out.json.*.tmp")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f".cells.json.{_io._host()}-{int(dead.stdout)}.abcdefgh.tmp"
    stale.write_text("left by a killed writer")
    elsewhere = tmp_path / ".cells.json.otherhost-1.abcdefgh.tmp"  # another machine's writer: cannot be judged
    elsewhere.write_text("")
    unnamed_new, unnamed_old = tmp_path / ".a.json.x1y2z3.tmp", tmp_path / ".b.json.x1y2z3.tmp"
    for path in (unnamed_new, unnamed_old):
        path.write_text("")
    day_ago = time.time() - _io.UNNAMED_STALE_S - 60
    os.utime(unnamed_old, (day_ago, day_ago))

    assert remove_stale_temporaries(tmp_path) == 2
    assert sorted(p.name for p in tmp_path.glob(".*.tmp")) == sorted([live.name, elsewhere.name, unnamed_new.name])
    writer.communicate("go\n")  # the writer in flight still completes its rename
    assert writer.returncode == 0 and (tmp_path / "out.json").read_text() == "partial and finished"


def test_a_temporary_file_names_its_writer(tmp_path):
    with atomic_write(tmp_path / "x.csv") as fh:
        (tmp,) = tmp_path.glob(".x.csv.*.tmp")
        fh.write("x")
    match = _io._TEMPORARY.fullmatch(tmp.name)
    assert match and match["name"] == "x.csv" and int(match["pid"]) == os.getpid() and match["host"] == _io._host()
