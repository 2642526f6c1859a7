"""Declarative specs (tasks, models, runs, paper numbers) validated by pydantic."""
