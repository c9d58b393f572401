"""Numerical studies (CPU or any torch device): output error of low-precision checkpoints against a
float64 truth."""
from .error_study import (CONFIGS, FAMILIES, StudyConfig, StudyResult, check_claims, markdown_report, merge_results,
                          plot_results, result_from_dict, result_to_dict, run_study)

__all__ = ["CONFIGS", "FAMILIES", "StudyConfig", "StudyResult", "run_study", "check_claims", "markdown_report",
           "merge_results", "plot_results", "result_to_dict", "result_from_dict"]
