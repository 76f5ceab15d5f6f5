"""``iorig doctor``: what would distort a benchmark on a target, a data
pattern's real compressibility, the load generator's ceiling — and what
killed runs left changed on this machine (``--clean`` removes their files)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from iorig.cli.common import app, console
from iorig.cli.options import Rw
from iorig.errors import UserError
from iorig.units import parse_size


@app.command()
def doctor(
    ctx: typer.Context,
    target: Annotated[str | None, typer.Argument(help="file, directory or block device")] = None,
    data: Annotated[
        bool, typer.Option("--data", help="measure what a data pattern compresses to")
    ] = False,
    compress: Annotated[float, typer.Option(help="--data: compressible % per buffer")] = 0.0,
    dedupe: Annotated[float, typer.Option(help="--data: % of duplicate buffers")] = 0.0,
    generator: Annotated[
        bool,
        typer.Option(
            "--generator",
            help="measure the IOPS this machine's fio can generate (null engine, no storage)",
        ),
    ] = False,
    jobs: Annotated[int, typer.Option(min=1, max=1024, help="--generator: fio jobs")] = 1,
    iodepth: Annotated[
        int, typer.Option(min=1, max=65536, help="--generator: queue depth per job")
    ] = 32,
    bs: Annotated[str, typer.Option(help="--generator: block size")] = "4KiB",
    rw: Annotated[Rw, typer.Option(help="--generator: I/O pattern")] = Rw.randread,
    clean: Annotated[
        bool,
        typer.Option(
            "--clean",
            help="remove what killed runs left: their directories in TMPDIR and the data files "
            "they laid out (only iorig's, only once their run is dead)",
        ),
    ] = False,
    fio: Annotated[str | None, typer.Option(help="fio binary")] = None,
) -> None:
    """Check a target for what would distort a benchmark (nothing is written to
    it), a data pattern's real compressibility, or the load generator's ceiling;
    and this machine for what killed runs left (a block-throttle cap is put
    back; --clean removes their files)."""
    from iorig.analyze.generator import GeneratorShape
    from iorig.machine.recovery import recover
    from iorig.report.writers import terminal
    from iorig.run.doctor import examine, measure_data_pattern, measure_generator
    from iorig.targets import check_kind

    if target is not None:
        check_kind(target)
        if not Path(target).expanduser().exists():
            raise UserError(
                f"{target} does not exist: doctor looks at an existing file, directory or "
                "block device (and writes nothing to it)",
                hint="create the directory first, or give the one that will hold the target",
            )
    if generator:
        shape = GeneratorShape(jobs, iodepth, _block_size(bs), rw.value)
    found = recover(clean=clean)  # a cap a killed run left is put back in any case
    found += _reap(ctx.obj)
    for line in found:
        console.print(Text(line))
    if found and not clean and any(line.startswith("left by") for line in found):
        console.print("`iorig doctor --clean` removes what killed runs left")
    if not (target or data or generator):
        if not found:
            console.print("nothing left behind by killed iorig runs")
        return
    if target is not None:
        console.print(terminal.doctor_view(examine(target, fio)))
    if data:
        where = Path(target) if target and Path(target).is_dir() else None
        pattern = measure_data_pattern(compress, dedupe, where, fio)
        console.print(terminal.data_pattern_view(pattern))
    if generator:
        console.print(terminal.generator_view(measure_generator(shape, fio_path=fio)))


def _reap(db: Path) -> list[str]:
    """Runs of the results database left ``running`` by a killed iorig,
    marked ``aborted`` (as the next run or ``runs`` would); a database that
    does not exist is not made."""
    from iorig.store import Store

    if not db.is_file():
        return []
    with Store(db) as store:
        return [
            f"marked run {run_id} aborted: its iorig process ended without finishing"
            for run_id in store.reap_stale()
        ]


def _block_size(text: str) -> int:
    try:
        size = parse_size(text)
    except ValueError as exc:
        raise UserError(f"--bs: {exc}", hint="e.g. --bs 4KiB") from None
    if not 512 <= size <= 2**30:
        raise UserError(f"--bs {text}: a block size must be 512 B to 1 GiB", hint="e.g. --bs 4KiB")
    return size
