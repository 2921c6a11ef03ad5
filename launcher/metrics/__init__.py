"""Training metrics: the record format (records), reading them from any backend with an
incremental cache (index, cache, collect), curves (series), and their outputs (render,
plot), plus the live status line of `launcher run --follow` (progress)."""
