"""What a stored run means: summaries, comparisons with their significance,
verdicts, searches, audits. Pure functions over the model."""
