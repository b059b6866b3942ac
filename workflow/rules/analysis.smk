# Analysis stage: tables, figures, findings and the report (filled in by the analysis work).


def analysis_outputs():
    """Every analysis output of the preset."""
    return []
