"""What the test rooms share beside conftest's fixtures: clusters and polling, workspaces, the isolated
environment, and the loopback servers that play git over HTTPS and a hostile dashboard; the planner's
inputs as plain data (planning), verl checkpoints (checkpoints), batches for concurrent apply (batches),
teams on the GPU queue (gpu_queue), serve loops as processes (loops), notification receivers (receivers)
and the status page in-process (status_page). A test module imports from here, never from another test
module (tests/house/test_test_rooms.py)."""
