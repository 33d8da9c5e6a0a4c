"""One image's way: request -> plan -> build context -> engine -> verify -> smoke suite -> tags -> push."""
