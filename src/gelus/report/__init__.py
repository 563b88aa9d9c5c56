"""Statistics, figures and the HTML/Markdown report, all pure functions of experiment records.

metrics   the metrics table (direction, margin, unit), the Verdict, ClaimVerdict and Mark types
stats     the aggregate over seeds (one value) and the verdicts' design: paired t-tests, Holm, TOST
judge     the one judgment of a family of comparisons, and judged again under every selection rule
analysis  records + presets -> results tables, comparisons, claims, sensitivity, axes
setup     the setup beside the paper's, departures, wall time, time per step, environment
figures   the paper's Figures 2-7 from records, as each preset's FigureSpec says (plots take an ``ax``)
forest    every comparison's difference with its interval, coloured by verdict: the first figure
render    the verdicts at a glance first (forest figure, short table), then the experiments in the
          paper's order; HTML and a Markdown twin that reads in 100 columns
sources   the one door to stored records, the presets and the datasets on this machine
cli       ``gelus report`` and ``gelus reproduce``

The selection protocol (:mod:`gelus.experiments.selection`) and the aggregate over seeds
(:mod:`gelus.experiments.aggregate`) are shared with ``gelus run``'s summary.
"""

__all__: list[str] = []
