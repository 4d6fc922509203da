"""``atlas arena fit|schedule|simulate``: Bradley-Terry ratings from paired comparisons."""
from __future__ import annotations

import json
from pathlib import Path

import typer

from ._common import check_seed, console, json_safe, output_file, print_frame, warn
from ._options import cli_names

#: the library's names in an error -> the options that set them (``cli_names``)
_FIT_OPTIONS = {"prior_games": "--prior-games", "ties handling": "--ties",
                "ties='half'": "--ties half", "reference player": "--reference player"}

arena_app = typer.Typer(rich_markup_mode=None, help="Paired comparisons (arena battles): Bradley-Terry ratings with ties, "
                             "adaptive matchmaking.", no_args_is_help=True)


@arena_app.command("fit")
def fit(
    battles: Path = typer.Argument(..., help="Battles CSV/JSONL/Parquet: model_a, model_b, "
                                             "winner (a|b|tie); or the bundled arena-demo."),
    output: Path = typer.Option(None, "-o", "--output", help="Write the ratings table to CSV."),
    ties: str = typer.Option("rao-kupper", "--ties", help="Tie model: rao-kupper, half or drop."),
    prior_games: float = typer.Option(0.0, "--prior-games",
                                      help="Virtual games per player against a rating-0 anchor "
                                           "(needed when someone never won or never lost)."),
    reference: str = typer.Option(None, "--reference", help="Pin this player at rating 0 "
                                                            "[default: ratings sum to zero]."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON records instead of a table."),
):
    """Fit Bradley-Terry ratings (MM algorithm, Rao-Kupper ties) with standard errors."""
    from ..catalogue import resolve_battles
    from ..design.bradley_terry import BradleyTerry, read_battles

    output_file(output, inputs={"BATTLES": battles})
    df = read_battles(resolve_battles(battles), option="BATTLES")
    model = cli_names(lambda: BradleyTerry(ties=ties, prior_games=prior_games,
                                           constraint="reference" if reference else "sum_zero",
                                           reference=reference).fit(df), _FIT_OPTIONS)
    if not model.converged_:
        warn(f"the MM algorithm did not converge in {model.n_iter_} iterations: the ratings "
             "below are its last step, not the maximum likelihood")
    table = model.to_frame()
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(output, index=False, float_format="%.10g")
    gaps = model.adjacent_differences()
    prior_only = (model.prior_only_ or "").replace("prior_games=", "--prior-games ")
    if as_json:
        tie_param = model.tie_param_ if ties == "rao-kupper" else None
        console.print_json(json.dumps(json_safe({"ties": ties, "loglik": model.loglik_,
                                       "tie_param": tie_param,
                                       "tie_param_interval": model.tie_param_interval(),
                                       "prior_only": prior_only or None,
                                       "ratings": table.to_dict(orient="records"),
                                       "adjacent": gaps.to_dict(orient="records")})))
        return
    comp = model.comparisons_
    n_ties = int(round(comp.ties.sum() / 2))
    dropped = f" ({n_ties} ties left out)" if ties == "drop" and n_ties else ""
    print_frame(table, title=f"Bradley-Terry ratings: {comp.n_players} players, "
                             f"{comp.n_games} games{dropped}")
    band = model.tie_param_interval()
    band = f" (95% {band[0]:.4g}-{band[1]:.4g})" if band else " (no ties)" if not n_ties else ""
    tie_words = {"rao-kupper": f"Rao-Kupper tie parameter = {model.tie_param_:.4g}{band}",
                 "half": "a tie counted as half a win for each player",
                 "drop": "ties left out"}[ties]
    console.print(f"{tie_words}; log-likelihood {model.loglik_:.6g}; {model.n_iter_} MM iterations")
    console.print(_stability_line(gaps))
    if prior_only:
        console.print(f"note: {prior_only}")
    if output is not None:
        console.print(f"wrote {output}")


def _stability_line(gaps) -> str:
    """Which neighbouring ranks the games tell apart at 95%."""
    apart = [f"{r.rank}-{r.rank + 1} ({r.player} > {r.next_player})"
             for r in gaps.itertuples() if r.separated]
    if len(apart) == len(gaps):
        return "every rank is told apart from the next at 95% (difference > 1.96 SE)"
    told = ", ".join(apart[:_MOST_PAIRS]) if apart else "none"
    if len(apart) > _MOST_PAIRS:   # 100 models: 44 pairs on one line; --json lists them all
        told += f" and {len(apart) - _MOST_PAIRS} more (of {len(gaps)}; --json lists them)"
    return (f"neighbouring ranks told apart at 95% (difference > 1.96 SE): {told}; "
            f"{len(gaps) - len(apart)} other neighbouring pair(s) could swap")


_MOST_PAIRS = 8   # separated neighbours named on the line


@arena_app.command("schedule")
def schedule_cmd(
    battles: Path = typer.Argument(..., help="Battles played so far (model_a, model_b, "
                                             "winner); or the bundled arena-demo."),
    n: int = typer.Option(10, "-n", "--pairs", help="Number of pairs to schedule."),
    criterion: str = typer.Option("det", "--criterion", help="det (information gain) or variance."),
    prior_games: float = typer.Option(1.0, "--prior-games", help="Virtual games per player in the fit."),
    add: list[str] = typer.Option([], "--add-player", metavar="MODEL",
                                  help="A model that has not played yet, scheduled into the next "
                                       "games (repeat the option for several)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON records instead of a table."),
):
    """The next pairs to play: maximal expected information about the ratings."""
    from ..catalogue import resolve_battles
    from ..design.arena import schedule
    from ..design.bradley_terry import read_battles

    df = read_battles(resolve_battles(battles), option="BATTLES")
    plan = cli_names(lambda: schedule(df, n, criterion=criterion, prior_games=prior_games,
                                      new_players=add),
                     {**_FIT_OPTIONS, "n_pairs": "-n/--pairs", "unknown criterion": "unknown --criterion"})
    if as_json:
        console.print_json(json.dumps(plan.to_dict(orient="records")))
        return
    plan.insert(0, "order", range(1, len(plan) + 1))
    print_frame(plan, title=f"next {len(plan)} pairs ({criterion} criterion)")


@arena_app.command("simulate")
def simulate_cmd(
    players: int = typer.Option(20, "--players", help="Number of simulated players."),
    rating_sd: float = typer.Option(1.0, "--rating-sd", help="SD of the true ratings (logits)."),
    seeds: int = typer.Option(5, "--seeds", help="Number of simulated arenas."),
    games: int = typer.Option(3000, "--games", help="Games per arena and strategy."),
    threshold: float = typer.Option(0.95, "--threshold", help="Target Spearman correlation."),
    tie_param: float = typer.Option(1.0, "--tie-param", help="Rao-Kupper theta of the truth (1: no ties)."),
    seed: int = typer.Option(0, "--seed", help="Master seed of the simulated arenas."),
):
    """Adaptive vs random vs round-robin pairing: games to reach a rank correlation."""
    from ..design.arena import compare_schedulers

    check_seed(seed)
    df = cli_names(lambda: compare_schedulers(players, rating_sd=rating_sd, n_seeds=seeds,
                                              n_games=games, threshold=threshold,
                                              tie_param=tie_param, seed=seed),
                   {"n_seeds": "--seeds", "rating_sd": "--rating-sd", "threshold": "--threshold",
                    "n_games": "--games", "tie_param": "--tie-param", "n_players": "--players"})
    summary = df.groupby("strategy", sort=False).agg(
        games_first=("games_first", "mean"), games_sustained=("games_sustained", "mean"),
        reached=("reached", "mean"), final_spearman=("final_spearman", "mean")).reset_index()
    print_frame(summary, title=f"games to Spearman >= {threshold} ({players} players, sd {rating_sd}, "
                               f"{seeds} seeds; unreached runs count as {games})")


def register(app: typer.Typer) -> None:
    app.add_typer(arena_app, name="arena")
