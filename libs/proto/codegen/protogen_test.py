"""The committed generated code is exactly what the committed `.proto` files generate.

Regenerates into a temporary directory and compares every file, both ways (a file missing from
either side fails too). Leaves out what the generated messages do, which coxswain_routing's wire
tests cover.
"""

from __future__ import annotations

from pathlib import Path

from protogen import generate

COMMITTED = Path("libs/proto/src/coxswain_proto/gen")


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        # BUILD files are not sources, so Pants does not put them in the sandbox.
        if p.is_file() and p.name != "BUILD" and "__pycache__" not in p.parts
    }


def test_committed_code_matches_a_fresh_generation(tmp_path: Path) -> None:
    generate(Path("proto"), tmp_path / "gen")
    fresh, committed = _files(tmp_path / "gen"), _files(COMMITTED)
    assert sorted(fresh) == sorted(committed), "regenerate: ./pants run libs/proto/codegen:generate"
    stale = [name for name in fresh if fresh[name] != committed[name]]
    assert not stale, f"stale generated files {stale}: ./pants run libs/proto/codegen:generate"
