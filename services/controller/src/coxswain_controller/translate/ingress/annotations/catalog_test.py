"""The catalog and the doc that lists it: docs/migrating-from-ingress-nginx.md's "Every
annotation" table is `markdown_table()`'s output, so the two never disagree. Leaves out what
each fate does to an Ingress (policy_test.py, the golden cases)."""

from __future__ import annotations

from pathlib import Path

from coxswain_controller.translate.ingress.annotations.catalog import CATALOG, Fate, markdown_table

DOC = Path(__file__).parents[7] / "docs" / "migrating-from-ingress-nginx.md"


def test_the_doc_table_is_the_catalog() -> None:
    text = DOC.read_text()
    table = text[text.index("| annotation | fate | what Coxswain does |") :]
    assert table == markdown_table(), "regenerate the table with catalog.markdown_table()"


def test_the_tls_families_are_honoured() -> None:
    for key in ("proxy-ssl-secret", "proxy-ssl-verify", "proxy-ssl-name"):
        assert CATALOG[key].fate is Fate.HONOURED
