"""Environment snapshots: collect facts about the live machine, fingerprint them, explain drift.

``collect.take_snapshot(options)`` runs the independent collectors (one module per area) and
returns a ``document.Snapshot``; ``diff.diff_snapshots`` explains the drift between two of them;
``golden`` stores and checks named ones. ``megacpp_env.doctor`` (above the spec, the lock and this
package) compares one with what a target promises. Nothing here needs a spec or a lock at run time,
nor imports the pipeline (checkout, overlay, lock): what a checkout is comes from
``megacpp_env.worktree``. Nothing here prints or exits.
"""

from __future__ import annotations
