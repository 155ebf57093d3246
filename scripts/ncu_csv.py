"""Reading `ncu --csv` output: one dict per profiled launch, in launch
order, with each metric's value (durations in ns) and the kernel's base
name. Shared by compare_ncu.py and bench/pytorch/fidelity.py."""
import csv
import re

DUR = "gpu__time_duration.sum"
UNIT = {"ns": 1, "nsecond": 1, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6, "s": 1e9, "second": 1e9}


def base(name):
    """A kernel's function name without namespaces, template arguments and
    parameters; ncu writes anonymous namespaces as `<unnamed>`, demanglers
    as `(anonymous namespace)`."""
    s = name.replace("(anonymous namespace)::", "").replace("<unnamed>::", "")
    s = re.sub(r"\(.*", "", s)
    s = re.sub(r"<.*", "", s)
    return s.split()[-1].split("::")[-1] if s.split() else s


def launches(path):
    rows = [r for r in csv.reader(open(path)) if r]
    # The profiled program's own output comes first; the table starts at "ID".
    start = next(i for i, r in enumerate(rows) if r[0] == "ID")
    head, rows = rows[start], rows[start + 1:]
    col = {c: i for i, c in enumerate(head)}
    by_id = {}
    for r in rows:
        if len(r) != len(head) or not r[col["ID"]].isdigit():
            continue
        d = by_id.setdefault(int(r[col["ID"]]), {"base": base(r[col["Kernel Name"]])})
        try:
            x = float(r[col["Metric Value"]].replace(",", ""))
        except ValueError:
            continue
        if r[col["Metric Name"]] == DUR:
            x *= UNIT.get(r[col["Metric Unit"]], 1)
        d[r[col["Metric Name"]]] = x
    return [by_id[i] for i in sorted(by_id)]
