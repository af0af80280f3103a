# Point labels (analysis/labels.py): the keys that vary among the points drawn together,
# wrapped, values shortened only while labels stay apart, never two labels alike.
from analysis import labels


def test_varying_keys_in_reading_order():
    cfgs = [dict(model="gpt2", strategy="no_shard", seed=1, lr=1e-3, repetition=0),
            dict(model="gpt2", strategy="full_shard", seed=1, lr=3e-4, repetition=1),
            dict(model="gpt2", strategy="full_shard", seed=1, lr=3e-4, extra="x")]
    # strategy first (labels.FIRST), then alphabetically; a key one config lacks differs;
    # the repetition is set by expansion and left out unless asked for.
    assert labels.varying_keys(cfgs) == ["strategy", "extra", "lr"]
    assert labels.varying_keys(cfgs, drop={"lr"}) == ["strategy", "extra"]
    assert labels.varying_keys(cfgs, ignore=()) == ["strategy", "extra", "lr", "repetition"]
    assert labels.varying_keys([cfgs[0]]) == [] and labels.varying_keys([]) == []


def test_point_labels_wrap_and_fall_back():
    cfgs = [dict(model="gpt2", strategy="no_shard", compression="none", world=2),
            dict(model="gpt2", strategy="full_shard", compression="hybrid", world=2)]
    assert labels.point_labels(cfgs) == ["strategy=no_shard\ncompression=none",
                                         "strategy=full_shard\ncompression=hybrid"]
    # Nothing varies: the fallback keys, else the names (cut in the middle).
    assert labels.point_labels(cfgs[:1], fallback=("model", "world")) == ["model=gpt2 world=2"]
    name = "train/gpt2/world=2/threads=1/none/full_shard/hybrid/auto/single-stream/queries=32"
    assert labels.point_labels([{}], [name], fallback=()) == [
        "train/gpt2/world=2\u2026stream/queries=32"]


def test_long_values_are_shortened_while_labels_stay_apart():
    a = "/data/models/bert-base-uncased-finetuned-on-the-enron-corpus"
    b = "/data/other/bert-base-uncased-finetuned-on-the-enron-corpus"
    c = "/data/models/distilbert-base-uncased"
    # A path by its last component; over 24 characters cut in the middle.
    assert labels.point_labels([{"model": a}, {"model": c}]) == [
        "model=bert-base-un\u2026nron-corpus", "model=distilbert-base-uncased"]
    # Two paths of one last component: shortening would make them alike, so they stay whole.
    assert labels.point_labels([{"model": a}, {"model": b}]) == [f"model={a}", f"model={b}"]
    # Equal on every shown key (they differ only in a dropped one): numbered.
    assert labels.point_labels([{"x": 1, "y": 1}, {"x": 1, "y": 2}], drop={"y"},
                               fallback=("x",)) == ["x=1 (1)", "x=1 (2)"]
