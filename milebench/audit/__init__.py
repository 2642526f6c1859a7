"""The inference audit any benchmark that generates answers can run: the trace of what an adapter generated
(answer, ids and step margins), batch invariance against answering alone, and rates of changed answers
with Wilson intervals. A benchmark binds it to its samples and scorer (MileBench: ``milebench audit``)."""
