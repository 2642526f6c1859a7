"""The run's audit tables for the report: read from the files ``milebench audit`` wrote for the audits
the run spec declares (``audit:``), laid out as the audit prints them; the report computes none."""

from __future__ import annotations

from milebench.audit.batch import BatchAudit
from milebench.audit.render import AuditTable, batch_tables
from milebench.benchmarks.milebench.audit.drift import DriftAudit
from milebench.benchmarks.milebench.audit.drift_render import drift_tables
from milebench.benchmarks.milebench.audit.plan import audit_jobs
from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.spec.registry import Specs
from milebench.benchmarks.milebench.spec.run import RunSpec
from milebench.record_files import read_record


def made_by(kind: str, run: str, arguments: list[str]) -> str:
    return "`" + " ".join(["milebench", "audit", kind, "--run", run, *arguments]) + "`"


def audit_tables(specs: Specs, run: RunSpec, paths: RunPaths) -> list[AuditTable]:
    """Every declared audit's tables, batch audits first, in the spec's order."""
    jobs = audit_jobs(specs, run)
    tables: list[AuditTable] = []
    for batch in jobs.batch:
        by = made_by("batch", run.name, batch.arguments())
        tables += batch_tables(read_record(paths.audit(batch.name), BatchAudit, "batch audit", by))
    for drift in jobs.drift:
        by = made_by("drift", run.name, drift.arguments())
        tables += drift_tables(read_record(paths.audit(drift.name), DriftAudit, "drift audit", by))
    return tables
