"""The ACM artifact badges a bundle's files and checks stand behind, and the summary an evaluator pastes.

Every file in a bundle has a role; a role backs the badges whose claims the file is evidence for. A badge
is granted when every check it rests on passed, and the summary shows each check's evidence beside it.
"""

from __future__ import annotations

from enum import StrEnum


class Badge(StrEnum):
    AVAILABLE = "Available"
    FUNCTIONAL = "Functional"
    REUSABLE = "Reusable"
    RESULTS_REPRODUCED = "Results Reproduced"


class Role(StrEnum):
    """What a bundled file is."""

    IMAGE = "image"
    IMAGE_RECORD = "image-record"
    SBOM = "sbom"
    SOURCE = "source"
    WORKFLOW = "workflow"
    SPEC = "spec"
    RUN_SPEC = "run-spec"
    LOCK = "lock"
    FETCH_MANIFEST = "fetch-manifest"
    PREPARED = "prepared"
    PREDICTION = "prediction"
    JOURNAL = "journal"
    JUDGMENT = "judgment"
    TASK_SCORE = "task-score"
    AGGREGATE = "aggregate"
    VERDICT = "verdict"
    REPORT = "report"
    FIGURE = "figure"
    PROVENANCE = "provenance"
    LOG = "log"
    DATA_ARCHIVE = "data-archive"
    WEIGHTS = "weights"
    CRATE = "crate"


A, F, U, R = Badge.AVAILABLE, Badge.FUNCTIONAL, Badge.REUSABLE, Badge.RESULTS_REPRODUCED
BACKS: dict[Role, tuple[Badge, ...]] = {
    Role.IMAGE: (F, U, R),
    Role.IMAGE_RECORD: (F,),
    Role.SBOM: (U,),
    Role.SOURCE: (A, F, U),
    Role.WORKFLOW: (F, U),
    Role.SPEC: (F, U),
    Role.RUN_SPEC: (F, U, R),
    Role.LOCK: (F, R),
    Role.FETCH_MANIFEST: (R,),
    Role.PREPARED: (R,),
    Role.PREDICTION: (R,),
    Role.JOURNAL: (R,),
    Role.JUDGMENT: (R,),
    Role.TASK_SCORE: (R,),
    Role.AGGREGATE: (R,),
    Role.VERDICT: (R,),
    Role.REPORT: (R,),
    Role.FIGURE: (R,),
    Role.PROVENANCE: (F, R),
    Role.LOG: (A,),
    Role.DATA_ARCHIVE: (R,),
    Role.WEIGHTS: (R,),
    Role.CRATE: (A, U),
}
"""Which badges' claims each kind of file is evidence for (recorded per file in the manifest)."""


REQUIRES: dict[Badge, tuple[str, ...]] = {
    Badge.AVAILABLE: ("hashes",),
    Badge.FUNCTIONAL: ("hashes", "images", "rescore"),
    Badge.REUSABLE: ("hashes", "images", "rescore"),
    Badge.RESULTS_REPRODUCED: ("hashes", "images", "rescore", "report", "rerun"),
}
"""The checks each badge rests on (Reusable also needs an SBOM per image and the kit's source)."""
CLAIMS: dict[Badge, str] = {
    Badge.AVAILABLE: "the bundle is complete and unaltered, with RO-Crate metadata for an archival "
    "repository",
    Badge.FUNCTIONAL: "the archived environments load and the kit's commands run in them offline",
    Badge.REUSABLE: "every environment is described (CycloneDX SBOM per image), with the kit's source "
    "and specs",
    Badge.RESULTS_REPRODUCED: "scores, verdict and report follow again from the predictions, and re-run "
    "inference reproduces the predictions",
}
