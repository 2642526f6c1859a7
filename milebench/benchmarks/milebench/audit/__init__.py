"""MileBench's audits (``milebench audit batch`` and ``drift``): the batch audit of the core
(``milebench.audit``) bound to MileBench's prepared samples and scorers, the drift of a model's answers and
scores between two environments or backends on the paper table's columns, and the audits a run spec plans."""
