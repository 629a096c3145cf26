import multiprocessing
import os
import tempfile
from pathlib import Path

import pytest

from histmig.sources import spill
from histmig.sources.jsonl import _descriptor


@pytest.fixture
def tmpdir_(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def _pread(where: tuple[str, int, int], length: int) -> bytes:
    return os.pread(_descriptor(where), length, 0)


def test_a_spill_has_no_name_and_a_process_forked_before_it_reads_it(tmpdir_: Path) -> None:
    context = multiprocessing.get_context("fork")
    with context.Pool(1) as pool:  # forked before the spill is made, as the run's workers are
        file, where = spill.worker_readable(".cells")
        file.write(b"cells of a run")
        file.flush()
        assert list(tmpdir_.iterdir()) == []  # nothing a killed run could leave behind
        assert where[0] == f"/proc/{os.getpid()}/fd/{file.fileno()}"
        assert pool.apply(_pread, (where, 14)) == b"cells of a run"
        file.close()


def test_without_descriptor_links_a_spill_is_a_named_file_removed_on_close(
    tmpdir_: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spill.os.path, "exists", lambda path: False)
    file, where = spill.worker_readable(".cells")
    file.write(b"x")
    file.flush()
    (named,) = tmpdir_.iterdir()
    assert where[0] == str(named) and named.name.startswith("histmig-") and named.suffix == ".cells"
    assert os.pread(_descriptor(where), 1, 0) == b"x"
    file.close()
    assert list(tmpdir_.iterdir()) == []
