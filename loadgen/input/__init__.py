"""Input: scenario files, their schema and overrides, calibration profiles, traces and the seeded
workload and chaos plan a run replays."""
