{"traceEvents": [{"ph": "X", "name": "k", "ts": 1, "dur": 2}]}
