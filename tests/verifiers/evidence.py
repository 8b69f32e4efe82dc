"""Realistic claim, context and evidence shared by the verifier tests (web snippets as items store them)."""

CLAIM = "Mount Katahdin is 6,288.2 feet (1,917.6 meters) tall."
CONTEXT = (
    "Mount Katahdin, the highest peak in Maine, is 6,288.2 feet (1,917.6 meters) tall and ends the Appalachian Trail."
)
EVIDENCE = [
    {
        "text": "Katahdin is the highest mountain in the U.S. state of Maine at 5,269 feet (1,606 m).",
        "title": "Mount Katahdin - Wikipedia",
        "url": "https://en.wikipedia.org/wiki/Mount_Katahdin",
        "source_type": "encyclopedia",
    },
    {
        "text": "Baxter Peak, the summit of Katahdin, marks the northern terminus of the Appalachian Trail ...",
        "title": "Katahdin | Baxter State Park",
        "url": "https://baxterstatepark.org/katahdin/",
        "source_type": "government",
    },
    {
        "text": "The AT&T tower in Nashville is 617 feet <188 m> tall.",
        "title": "Tallest buildings in Tennessee",
        "url": "https://example.org/towers?city=nashville&state=tn",
        "source_type": "web",
    },
]
