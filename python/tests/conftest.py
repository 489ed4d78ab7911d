import os
import sys

import pytest

# Always test the installed package (scripts/test-python.sh pip-installs it).
here = os.path.dirname(os.path.abspath(__file__))
if here not in sys.path:
    sys.path.insert(0, here)


@pytest.fixture(scope="session")
def jg():
    import jitgrad

    return jitgrad


@pytest.fixture(scope="session")
def torch():
    return pytest.importorskip("torch")
