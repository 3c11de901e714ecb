"""Which models: the catalog (download, assemble, check) and drafter compatibility verdicts."""

from engine.models import catalog
from engine.models.compat import Verdict, check

__all__ = ["Verdict", "catalog", "check"]
