"""Fakelets: fake raylets that a real Ray GCS schedules placement groups on (docs/ray-fakelets.md).

A fakelet registers with the GCS as a raylet, answers its health checks, resource-load polls and
the placement-group bundle calls (prepare, commit, remove, release unused) from its own book of
8 GPUs, CPUs and memory, and (optionally) streams its resource view to the GCS's syncer. Many
fakelets share one process; a 10,000-node fleet is a few such processes beside one real head.

What a fakelet does not do: start workers (no task or actor ever runs on it, so RequestWorkerLease
and the actor calls are UNIMPLEMENTED and counted), hold objects (no plasma store or object
manager), host a driver (ray.init needs the real head raylet), reject a drain while busy, or
report the periodic views a real raylet sends when nothing changed.

Modules: wire (the syncer descriptor and health codec the wheel lacks), book (pure bundle
accounting of one node), node (one fakelet's server and stream), fleet (many in one loop), serve
(the process), shards (the parent's side, which never imports ray).
"""
