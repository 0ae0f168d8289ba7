"""The quickstart notebook runs top to bottom (on a tiny config: DABJAX_NOTEBOOK_CI=1)."""

import pathlib

import nbformat
from nbclient import NotebookClient

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_quickstart_notebook_executes(tmp_path, monkeypatch):
    notebook = nbformat.read(ROOT / "notebooks" / "quickstart.ipynb", as_version=4)
    monkeypatch.setenv("DABJAX_NOTEBOOK_CI", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    client = NotebookClient(notebook, timeout=900, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    outputs = "".join(
        output.get("text", "")
        for cell in notebook.cells if cell.cell_type == "code"
        for output in cell.get("outputs", [])
    )
    assert "dabjax 0.1.0" in outputs
    assert "pretrained agents: ['3x3', '4x4', '5x5']" in outputs  # played before any training
    assert "pretrained:5x5 vs level2: won" in outputs and "pretrained:5x5 plays " in outputs
    assert "vs level2  won " in outputs  # the trained 3x3 agent's match
    assert "game over" in outputs  # the rendered game reached the end
    assert (tmp_path / "runs" / "quickstart" / "metrics.jsonl").exists()
    assert any((tmp_path / "runs" / "quickstart" / "plots").glob("*.png"))
