"""conftest.TIERS names tests that exist: a renamed file or test would otherwise drop
out of its tier silently, into `make test-fast`."""
import re
from pathlib import Path

import pytest

from conftest import TIERS, _TESTS_ROOT

ENTRIES = sorted((tier, name) for tier, names in TIERS.items() for name in names)


@pytest.mark.parametrize("tier,name", ENTRIES, ids=[name for _, name in ENTRIES])
def test_a_tier_entry_names_an_existing_test(tier, name):
    file, _, test = name.partition("::")
    path = Path(_TESTS_ROOT) / file
    assert path.is_file(), f"{tier}: no {file}"
    if test:
        assert re.search(rf"^def {re.escape(test)}\(", path.read_text(), re.M), f"{tier}: no {test} in {file}"
