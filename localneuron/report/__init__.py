"""The portability report: one package building it from what the run recorded (the op counts, the
device's counters, the time by source line, each used layer's section) and its views, text, JSON and
HTML, all rendering the same data; under a launcher, every rank's report merged into one. cli/ and the
vLLM integration only call it."""
