"""`launcher ui`: a read-only web dashboard over the Backend contract (the `ui` extra).

runs (every run, snapshotted in the background; filters and pages), auth (the token
check), logstream (a run's log as server-sent events with a resumable cursor), charts
and lttb (metric curves, downsampled), views (what templates show), app (the Starlette
app and its JSON API), command (`launcher ui`, which serves it).
"""
