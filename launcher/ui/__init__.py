"""`launcher ui`: a read-only web dashboard over the Backend contract (the `ui` extra).

runs (a page of runs at a time, asked of the stores; filters, cursors), updates (the
runs page's changes as server-sent events), auth (the token check), logstream (a run's log as server-sent events with a resumable cursor), charts
and lttb (metric curves, downsampled), views (what templates show), app (the Starlette
app and its JSON API), command (`launcher ui`, which serves it).
"""
