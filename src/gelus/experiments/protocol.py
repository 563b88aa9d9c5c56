"""What an experiment reports and how: its selection protocol and its figure, as preset data.

A preset carries one :class:`Protocol` and one :class:`FigureSpec`; the console summary, the
statistics, the figures and the report all take them from there (nothing looks an experiment up by
its name).
"""

from dataclasses import dataclass

__all__ = ["SELECTION_RULES", "FigureSpec", "Protocol"]

# The defensible ways to choose a learning rate on validation: metric and epoch.
SELECTION_RULES = {
    "val-loss-last": ("loss", "last"),
    "val-loss-best": ("loss", "best"),
    "val-error-last": ("error", "last"),
    "val-error-best": ("error", "best"),
}


@dataclass(frozen=True)
class Protocol:
    """How one experiment chooses its learning rate (and setting) and what it reports.

    Per config, activation and setting: for every learning rate take each seed's ``select_split``
    metric at the last (or best) epoch and choose the lr with the lowest median over seeds; report
    every seed's ``report_split`` metric at that lr and epoch. ``retrain_key`` names a boolean config
    key for a protocol that spans two configs: the lr is chosen on the config where it is false
    (tuning, with a validation split) and the test result read from the config where it is true
    (retrained on train + val), e.g. CIFAR-10's ``cnn.retrain_full``.
    """

    select_split: str = "val"  # the split the learning rate is chosen on
    select_metrics: tuple[str, ...] = ("error", "loss")  # the first one recorded is used
    report_split: str = "test"
    report_metrics: tuple[str, ...] = (
        "error",
        "loss",
    )  # headline first; those recorded are reported
    epoch: str = (
        "last"  # "last": the final epoch; "best": each seed's epoch of lowest select metric
    )
    tune_setting: bool = False  # choose the setting (e.g. dropout keep) on validation with the lr
    retrain_key: str | None = None  # tune on key=false, report the key=true config at that lr
    # compare every other activation with this one (two-sided: better / worse / unresolved)
    # instead of the paper's pairs (the GELU family against the baselines)
    reference: str | None = None

    def with_rule(self, rule: str) -> "Protocol":
        """This protocol choosing by one of ``SELECTION_RULES`` (split, reporting and retraining
        unchanged)."""
        import dataclasses

        metric, epoch = SELECTION_RULES[rule]
        return dataclasses.replace(self, select_metrics=(metric,), epoch=epoch)

    def describe(self, select_metric: str) -> str:
        """The protocol in words, for the report."""
        where = "at the last epoch" if self.epoch == "last" else "at each seed's best epoch"
        what = "learning rate and setting" if self.tune_setting else "learning rate"
        text = (
            f"{what} chosen at the lowest median {self.select_split} {select_metric} {where}; "
            f"{self.report_split} reported there, median over seeds"
        )
        if self.retrain_key:
            text += (
                f"; with a {self.retrain_key}=true config in the records, the lr is chosen on the "
                f"{self.retrain_key}=false runs and the test result read from the {self.retrain_key}=true runs"
            )
        return text


@dataclass(frozen=True)
class FigureSpec:
    """The paper's figure of one experiment: its number and what its curves show."""

    number: int | None = None  # the paper's figure number (None: the paper has none)
    metrics: tuple[str, ...] = ("loss", "error")  # curve metric, by preference (first recorded)
    held_out: tuple[str, ...] = ("val", "test")  # the held-out curve's split, by preference
    noise: bool = False  # also draw the noise-robustness figure (splits test@noise=a)
    wall_time: bool = False  # also draw the held-out curve against training time
