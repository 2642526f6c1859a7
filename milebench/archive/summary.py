"""The text an artifact evaluator pastes: each check with its evidence, mapped to the ACM badges."""

from __future__ import annotations

from collections.abc import Sequence

from milebench.archive.badges import CLAIMS, REQUIRES, Badge, Role
from milebench.archive.manifest import Manifest
from milebench.archive.verify import Outcome, Status


def extra_requirements(badge: Badge, manifest: Manifest) -> list[str]:
    """What a badge needs beyond its checks, when the bundle lacks it."""
    if badge is not Badge.REUSABLE:
        return []
    missing = [f"no SBOM of image {i.family}" for i in manifest.images if i.sbom is None]
    if not any(e.role is Role.SOURCE for e in manifest.files):
        missing.append("no kit source")
    return missing


def granted(badge: Badge, outcomes: Sequence[Outcome], manifest: Manifest) -> tuple[bool, list[str]]:
    """(granted, why not): every check the badge rests on passed and the bundle has what it needs."""
    status = {o.check.value: o.status for o in outcomes}
    missing = [
        f"check {c} {status.get(c, Status.NOT_RUN)}"
        for c in REQUIRES[badge]
        if status.get(c) is not Status.PASSED
    ]
    return not missing and not extra_requirements(badge, manifest), missing + extra_requirements(
        badge, manifest
    )


def summary(bundle_id: str, manifest: Manifest, outcomes: Sequence[Outcome]) -> str:
    """Markdown: the bundle, the checks with their evidence and problems, the badges."""
    lines = [
        f"# Artifact evaluation of bundle {bundle_id}",
        "",
        f"Run `{manifest.run}`; kit commit {', '.join(manifest.kit_commits)}"
        + (" (some jobs ran with uncommitted changes)" if manifest.dirty else "")
        + f"; {len(manifest.files)} files; images: "
        + (", ".join(f"{i.family} {i.image_id}" for i in manifest.images) or "none"),
        "",
        "| check | status | evidence |",
        "|---|---|---|",
    ]
    for o in outcomes:
        lines.append(f"| {o.check} | {o.status} | {'<br>'.join(o.evidence) or '-'} |")
    lines += ["", "| badge | granted | claim | evidence |", "|---|---|---|---|"]
    for badge in Badge:
        ok, why = granted(badge, outcomes, manifest)
        evidence = (
            "checks " + ", ".join(REQUIRES[badge]) + (" passed" if ok else f"; missing: {'; '.join(why)}")
        )
        lines.append(f"| {badge} | {'yes' if ok else 'no'} | {CLAIMS[badge]} | {evidence} |")
    problems = [f"- {o.check}: {p}" for o in outcomes for p in o.problems]
    if problems:
        lines += ["", "## Problems", "", *problems]
    return "\n".join(lines) + "\n"
