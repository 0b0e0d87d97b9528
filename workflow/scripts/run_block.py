"""Run one block of the schedule (snakemake rule `block`)."""

import sys

from bracket import embedded, rerun, secrets
from bracket.block import runner
from bracket.experiment import design, resolved
from bracket.measure import session
from bracket.rulelog import rule_log

# The script's own log (progress, the error that stopped it); the server writes log.server.
rerun.hold()  # while this block measures, a later snakemake of the folder takes its run for alive
with rule_log(snakemake.log.block):
    exp = snakemake.wildcards.exp
    k = int(snakemake.wildcards.k)
    experiment = embedded.with_llama_server(resolved.read(snakemake.input.experiment), snakemake.params.root)
    blocks = design.read(snakemake.input.schedule)  # recorded, never re-drawn
    try:
        runner.run_block(
            experiment,
            exp,
            blocks[k],
            len(blocks),
            raw_path=snakemake.output.raw,
            meta_path=snakemake.output.meta,
            log_path=snakemake.log.server,
            model=snakemake.params.model,
            python=snakemake.params.python,
            root=snakemake.params.root,
            lock_dir=session.host_lock_dir(),
        )
    except runner.BlockFailed as exc:
        print(f"\nblock {k + 1}/{len(blocks)} (block-{k}) of {exp} failed: {secrets.redact(str(exc))}", file=sys.stderr)
        sys.exit(1)
    except (KeyboardInterrupt, SystemExit) as exc:
        # Ctrl-C, or SIGTERM (turned into SystemExit by the runner): the server is already stopped.
        code = 130 if isinstance(exc, KeyboardInterrupt) else exc.code
        print(
            f"\nblock {k + 1}/{len(blocks)} (block-{k}) of {exp} interrupted; its server was stopped and the records "
            f"so far are kept. Run the same target again to resume at this block.",
            file=sys.stderr,
        )
        sys.exit(code)
