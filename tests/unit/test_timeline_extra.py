"""matplotlib is the optional ``timeline`` extra: the CLI says how to get it, and drawing never
touches the process's pyplot backend."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from spark_kafka_group.ops.cli.main import main
from spark_kafka_group.ops.timeline import INSTALL_TIMELINE


def test_timeline_without_matplotlib_names_the_extra_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # None in sys.modules makes `import matplotlib` raise ImportError, as where it is absent.
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    out = tmp_path / "timeline.png"
    store = str(tmp_path / "groups")

    code = main(["timeline", "--store", store, "--group", "g", "--out", str(out)])

    err = capsys.readouterr().err
    assert code == 1, err
    assert INSTALL_TIMELINE == "pip install matplotlib"
    assert INSTALL_TIMELINE in err and "matplotlib" in err, err
    assert "Traceback" not in err
    assert not out.exists()


def test_render_png_uses_its_own_canvas_and_leaves_the_backend_alone(tmp_path: Path) -> None:
    # A fresh interpreter: whether pyplot gets imported is per process.
    out = tmp_path / "timeline.png"
    script = textwrap.dedent(
        f"""
        import sys
        import matplotlib

        def refuse(*args, **kwargs):
            raise SystemExit(f"matplotlib.use{{args}} switched the process's backend")

        matplotlib.use = refuse
        from spark_kafka_group.ops.timeline import Commit, Segment, Timeline, render_png

        tl = Timeline(group_id="g", uri="file:///g", records=2, first_ms=0, last_ms=2_000)
        tl.segments.append(Segment("t", 0, "m1", "assigned", 0, 2_000))
        tl.members.append("m1")
        tl.commits.append(Commit(1_000, "t", 0, 5, "m1"))
        render_png(tl, {str(out)!r}, log_end={{("t", 0): 7}})
        assert "matplotlib.pyplot" not in sys.modules, "render_png imported pyplot"
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert out.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
