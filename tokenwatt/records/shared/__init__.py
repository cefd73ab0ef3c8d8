"""What every record is built from: the pydantic base and its helpers, and the fragments that run
and report records both keep (confidence intervals, a cloud run's cost).
"""
