"""Moved: item content lives in :mod:`atlascat.content.items` (a data format, below the live
runner); the shipped content banks are found by name in :mod:`atlascat.catalogue`."""
from .._moved import moved, names_of

__getattr__ = moved(__name__, namespace=globals(), new_homes={
    **names_of("atlascat.content.items", ("_normalize_loaded", "item_record", "build_prompt",
                                          "correct_answer_text", "wrong_answer_text",
                                          "items_frame", "CONTENT_COLUMNS")),
    **names_of("atlascat.content.parsing", ("_to_list",)),
    "load_content_bank": "atlascat.catalogue", "content_bank_path": "atlascat.catalogue",
})
