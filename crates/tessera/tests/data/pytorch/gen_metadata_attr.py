"""Writes valid-metadata-named-like-tensors.pt: a state dict whose `_tessera_metadata`
attribute (where Tessera's writer puts file metadata) has a key equal to a tensor's name,
as torch.save writes such a dict after `torch.load` of a Tessera file: the real `pickle`
module pickles the `OrderedDict` (its items, then its attribute by BUILD) with torch's
persistent ids for storages, through the stand-ins of gen_subclasses.py (torch is not
installed here). Tensors: "w" = arange(6) as float32 (2, 3), "b" = arange(6) + 10.
Metadata: "w" = "a note named like a tensor", "epoch" = 3.

Run: python3 gen_metadata_attr.py (any Python 3 with numpy).
"""
import collections

from gen_subclasses import T, save, storage


def main():
    sd = collections.OrderedDict([("w", T(storage(0))), ("b", T(storage(1)))])
    sd._tessera_metadata = {"w": "a note named like a tensor", "epoch": 3}
    save("valid-metadata-named-like-tensors.pt", sd)


if __name__ == "__main__":
    main()
