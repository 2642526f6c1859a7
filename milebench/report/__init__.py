"""Report stage: render the paper's tables from scores, in HTML and LaTeX."""
