"""How far to trust an estimate: the calibration error of the nearest kind of published row, and what
about the request lies outside the calibrated range. The figures come from calibration.json, which
benchmarks/calibration.py writes from the published rows (tests/estimate/test_calibration.py recomputes
it, so it cannot drift from the model)."""
import json
from pathlib import Path

from localneuron.costmodel import stacks

CALIBRATION = Path(__file__).with_name("calibration.json")
KIND = {"train": "training", "prefill": "prefill", "decode": "decode"}
# calibration.json's population of every row of a kind, each judged as its first stack
EVERY_ROW = "every row"


def table() -> dict:
    """hardware and kind ("trn1 train") -> what the calibration rows of that kind cover and how far off
    the model is on them; {} when the file is missing or unreadable."""
    try:
        data = json.loads(CALIBRATION.read_text())
    except (OSError, ValueError):
        return {}
    kinds = data.get("kinds") if isinstance(data, dict) else None
    return kinds if isinstance(kinds, dict) else {}


def _population(rows: dict, stack: str) -> tuple[dict | None, str]:
    """The rows an estimate priced as `stack` is judged by: those judged as that stack (calibration.json's per-stack
    entries), else None and the software every row of the kind ran."""
    judged = rows.get("stacks")
    judged = judged if isinstance(judged, dict) else {}
    own = judged.get(stack)
    if isinstance(own, dict) and {"rows", "mae", "worst"} <= set(own):
        return own, stack
    every = judged.get(EVERY_ROW)
    ran = every.get("populations") if isinstance(every, dict) else None
    return None, ", ".join(ran) if isinstance(ran, list) and ran else "other stacks"


def _outside(value, covered) -> bool:
    return isinstance(covered, list) and len(covered) == 2 and value is not None and not covered[0] <= value <= covered[1]


def assess(answer: dict) -> dict:
    mode, target = answer["request"]["mode"], answer["target"]
    kinds = table()
    key = f"{target} {mode}"
    nearest = key if key in kinds else next((k for k in kinds if k.endswith(f" {mode}")), None)
    warnings = []
    if nearest is None:
        return {"calibration": f"no published {KIND[mode]} row calibrates this estimate", "warnings": warnings}
    rows = kinds[nearest]
    if nearest != key:
        warnings.append(f"no published {target} {KIND[mode]} row: the nearest calibration is on {nearest.split()[0]}, "
                        f"and {target} is priced from its own hardware figures only")
    model, layout, request = answer["model"], answer["layout"], answer["request"]
    if model.get("experts") and not rows.get("moe"):
        warnings.append(f"mixture-of-experts: no published {nearest} row has one (routing taken as balanced)")
    family = model.get("model_type")
    if family in ("script", "factory"):
        warnings.append(f"your own model code: the calibration is that of the tuned recipes the published {nearest} "
                        f"rows ran, so code that does more (or less) than they do moves the answer accordingly")
    elif family and family not in rows.get("families", [family]):
        warnings.append(f"no published {nearest} row is a {family} model")
    lengths = {"seq": request.get("seq"), "batch": request.get("batch") or request.get("micro_batch"),
               "compiled_batch": request.get("compiled_batch"), "input_len": request.get("input_len"),
               "output_len": request.get("output_len")}
    for name, value in lengths.items():
        if name in rows and _outside(value, rows[name]):
            low, high = rows[name]
            warnings.append(f"{name.replace('_', ' ')} {value} is outside the calibrated {low}..{high}")
    for name in ("tp", "pp", "nodes", "lnc"):
        seen = rows.get(name)
        if isinstance(seen, list) and layout.get(name) not in seen:
            warnings.append(f"{name} {layout.get(name)}: no published {nearest} row has this layout "
                            f"(calibrated: {', '.join(map(str, seen))})")
    if request.get("dtype") in ("bf16", "fp32") and request.get("dtype") not in rows.get("dtypes", [request.get("dtype")]):
        warnings.append(f"dtype {request.get('dtype')}: no published {nearest} row runs it")
    stack = answer.get("stack", {}).get("name", stacks.DEFAULT)
    population, named = _population(rows, stack)
    if population is None:
        warnings.append(f"no published {nearest} row was judged as the {stack} stack: its efficiencies there are "
                        f"those of its nearest fitted generation or the default stack's, and the error quoted is on "
                        f"rows of {named}")
        population = rows
    error = population.get("held_out_mae", population["mae"])
    text = (f"±{100 * error:.0f}% (mean absolute error on configurations left out of the fit) on "
            f"{population['rows']} published {nearest.split()[0]} {KIND[mode]} rows judged as {named}, worst "
            f"{100 * population['worst']:.0f}%, bias {100 * population.get('bias', 0.0):+.0f}% (+: priced faster)")
    return {"calibration": text, "mean_abs_error": error, "rows": population["rows"], "nearest": nearest,
            "stack": named, "warnings": warnings}
