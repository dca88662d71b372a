"""What sits above the parts on the book's pages: the series at a glance, the primer's figures, the rig key and the
findings box at the top of each part, and the Sphinx extension that writes the static scripts the charts load
(book_static). The charts themselves live in figures/, on this same layer.

Imports the parts and every layer below them."""
