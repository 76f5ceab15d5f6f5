"""Scenario files and what else a user asks a run for, read as data and
checked: the schema, loading and templating, events, the system under test,
ad-hoc runs, sweeps, precision, and fio job files taken as scenarios."""
