"""Which models: the catalog (download, assemble, check) and drafter compatibility verdicts."""

from engine.models import catalog
from engine.models.compat import Verdict
from engine.models.vocabulary import check

__all__ = ["Verdict", "catalog", "check"]
